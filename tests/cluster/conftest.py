"""The ``cluster`` fixture: three hosts and a services host in network namespaces.

Layout (one /24 of 10.213.X.0, the bridge at ``.1`` in the root namespace, where the test
process runs)::

    a   (.11)  Spark standalone master + worker 1; the Spark drivers; HTTP ingest server 1
    b   (.12)  Spark worker 2; HTTP ingest server 2
    c   (.13)  the compactor
    svc (.14)  PostgreSQL (a private instance), moto's S3 server, the Tansu Kafka broker

Built once per session (per xdist worker) because the Spark daemons take tens of seconds
to start; each test gets its own bucket and metastore schema. Skips with the reason when
the machine cannot create network namespaces (not root, no CAP_SYS_ADMIN, no iproute2) or
has no Java. Everything is torn down in the fixture's ``finally``, failure or not.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster import services
from tests.cluster.hosts import Host, NetnsUnavailable, Network, probe_netns
from tests.plugins.s3_fixture import ACCESS_KEY, REGION, SECRET_KEY

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Cluster:
    """The running cluster, and how to reach its parts by address.

    Attributes:
        hosts: ``a``, ``b``, ``c``, ``svc`` (see the module docstring).
        gateway: The root namespace's (the test's) address on the bridge.
        log_dir: Every server's log, and the tests' scratch space.
        pg_root: The metastore database's URL (``postgresql://postgres@SVC:5432/metastore``).
        s3_endpoint: ``http://SVC:5000``.
        kafka_bootstrap: ``SVC:9092``.
        spark_master: ``spark://A:7077``.
    """

    hosts: Mapping[str, Host]
    gateway: str
    log_dir: Path
    pg_root: str
    s3_endpoint: str
    kafka_bootstrap: str
    spark_master: str

    def aws_env(self) -> dict[str, str]:
        """The standard AWS variables pointing at the cluster's S3 server (for processes
        on the hosts: the CLI, the Spark driver and, through it, the executors)."""
        return {
            "AWS_ENDPOINT_URL": self.s3_endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    def storage_options(self) -> dict[str, object]:
        """s3fs options for the cluster's S3 server (for the test's own reads)."""
        return {
            "endpoint_url": self.s3_endpoint,
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "client_kwargs": {"region_name": REGION},
        }

    def run(
        self,
        host: str,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to completion on ``host`` (cwd: the repository) and return it."""
        return subprocess.run(
            self.hosts[host].command(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
        )


_ids = itertools.count()


@dataclass(frozen=True)
class ClusterTest:
    """One test's share of the cluster: its own bucket and metastore schema.

    Attributes:
        cluster: The running :class:`Cluster`.
        bucket: A new empty bucket.
        warehouse: ``s3://<bucket>/warehouse``.
        metastore: The metastore URL with this test's own ``?schema=``.
        scratch: A directory of this test's own (configs, event logs).
    """

    cluster: Cluster
    bucket: str
    warehouse: str
    metastore: str
    scratch: Path


def _skip_reason() -> str | None:
    reason = probe_netns()
    if reason is not None:
        return f"cannot build cluster hosts: {reason}"
    if shutil.which("java") is None:
        return "no java on PATH (the Spark daemons need Java 17)"
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)"
    return None


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """Build the hosts and start every server; tear all down at the end of the session."""
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    from acidstream.jobs.broker import BrokerError, find_broker_binary

    try:
        tansu = find_broker_binary()
    except BrokerError as e:
        pytest.skip(f"Kafka broker unavailable: {e}")
    log_dir = Path(tempfile.mkdtemp(prefix="acidstream-cluster-"))
    net = Network(["a", "b", "c", "svc"])
    procs: list[services.Proc] = []
    pg: services.PrivatePostgres | None = None
    try:
        try:
            net.build()
        except NetnsUnavailable as e:
            pytest.skip(f"cannot build cluster hosts: {e}")
        h = net.hosts
        master = f"spark://{h['a'].ip}:{services.SPARK_MASTER_PORT}"
        # The JVMs start first and in parallel (workers retry until the master answers):
        # they are the slow part; the services start while they boot.
        procs.append(services.start_spark_master(h["a"], log_dir=log_dir, wait=False))
        procs += [services.start_spark_worker(h[x], master, log_dir=log_dir) for x in "ab"]
        assert net.subnet is not None
        pg = services.PrivatePostgres(h["svc"], str(net.subnet))
        pg.start()
        procs.append(services.start_moto(h["svc"], log_dir=log_dir))
        procs.append(services.start_tansu(h["svc"], tansu, log_dir=log_dir))
        services.wait_for(
            "two ALIVE Spark workers",
            lambda: services.alive_workers(h["a"]) == sorted([h["a"].ip, h["b"].ip]),
            timeout=180,
            proc=procs[0],
        )
        yield Cluster(
            hosts=dict(h),
            gateway=net.gateway,
            log_dir=log_dir,
            pg_root=pg.url,
            s3_endpoint=f"http://{h['svc'].ip}:{services.MOTO_PORT}",
            kafka_bootstrap=f"{h['svc'].ip}:{services.KAFKA_PORT}",
            spark_master=master,
        )
    finally:
        for p in reversed(procs):
            with contextlib.suppress(Exception):
                p.stop()
        if pg is not None:
            with contextlib.suppress(Exception):
                pg.stop()
        net.close()  # kills anything still running in the namespaces
        shutil.rmtree(log_dir, ignore_errors=True)


@pytest.fixture
def cluster_test(cluster: Cluster, tmp_path: Path) -> Iterator[ClusterTest]:
    """A new bucket and metastore schema on the cluster for one test (schema dropped after)."""
    import boto3  # type: ignore[import-untyped]
    import psycopg

    n = next(_ids)
    bucket = f"cluster-{os.getpid()}-{n}"
    boto3.client(
        "s3",
        endpoint_url=cluster.s3_endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    ).create_bucket(Bucket=bucket)
    schema = f"cluster_{os.getpid()}_{n}"
    scratch = cluster.log_dir / f"test-{n}"
    scratch.mkdir()
    try:
        yield ClusterTest(
            cluster=cluster,
            bucket=bucket,
            warehouse=f"s3://{bucket}/warehouse",
            metastore=f"{cluster.pg_root}?schema={schema}",
            scratch=scratch,
        )
    finally:
        with psycopg.connect(cluster.pg_root, autocommit=True, connect_timeout=5) as c:
            c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def python_argv(*args: str) -> list[str]:
    """``argv`` of this interpreter (the venv's, which the hosts share) with ``args``."""
    return [sys.executable, *args]
