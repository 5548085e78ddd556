"""Dead letters: the one record format and writer for records a writer could not convert.

Every writer (``StreamingConnection``, ``acidstream ingest``, the Spark sink's executor
tasks, the HTTP server) sends a bad record here instead of dropping it.
``dead_letter_path`` always names a DIRECTORY; each writer (each connection, each Spark
task attempt) appends to its own JSON-lines file in it, so concurrent writers never share
a file. One line per record::

    {"time": "2026-11-23T12:00:00Z", "source": "db.table", "position": "events/0@1234",
     "reason": "column 'id': ...", "record": "<text>"}

``record`` holds the record when it is UTF-8; otherwise ``record_base64`` holds its bytes
(never lossy). ``position`` says where the record came from (``file:byte offset``, Kafka
``topic/partition@offset``, HTTP request and line), when the writer knows it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from acidstream.acid.storage import Storage

__all__ = ["DeadLetter", "DeadLetterWriter", "dead_letter_entry", "read_dead_letters"]


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """One dead letter, as read back."""

    reason: str
    record: bytes
    source: str = ""
    position: str = ""
    time: str = ""


def dead_letter_entry(record: bytes, reason: str, *, source: str = "", position: str = "") -> bytes:
    """One JSON line (with its newline) for a bad record."""
    entry: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": source,
        "position": position,
        "reason": reason,
    }
    try:
        entry["record"] = record.decode("utf-8")
    except UnicodeDecodeError:
        entry["record_base64"] = base64.b64encode(record).decode("ascii")
    return json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n"


def default_file_name(source: str) -> str:
    """A file name no other writer uses: source, host, process and a random part."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in source) or "records"
    return f"{safe}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"


class DeadLetterWriter:
    """Appends dead letters to one file of its own in the dead-letter directory.

    The file is created on the first bad record (a run without bad records leaves
    nothing), and each line is flushed at once (durably on local disks) so that no
    dead letter is lost to a crash after ``add`` returned.
    """

    def __init__(
        self,
        directory: str,
        *,
        source: str = "",
        file_name: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.source = source
        # storage_options: the filesystem's (endpoint, credentials) when the directory is
        # remote, e.g. inside an s3:// warehouse.
        self._storage, self._root = Storage.for_path(directory, storage_options=storage_options)
        self._name = file_name or default_file_name(source)
        self._f: IO[bytes] | None = None
        self._lock = threading.Lock()
        self.count = 0

    @property
    def path(self) -> str:
        """The file this writer appends to (it exists once a record was added)."""
        return self._storage.join(self._root, self._name)

    def add(self, record: bytes, reason: str, *, position: str = "") -> None:
        line = dead_letter_entry(record, reason, source=self.source, position=position)
        with self._lock:
            if self._f is None:
                self._storage.makedirs(self._root)
                self._f = self._storage.create(self.path, overwrite=True)
            self._f.write(line)
            self._storage.durable_flush(self._f)
            self.count += 1

    def close(self) -> None:
        with self._lock:
            if self._f is not None and not self._f.closed:
                self._f.close()


def read_dead_letters(
    directory: str, *, storage_options: Mapping[str, Any] | None = None
) -> Iterator[DeadLetter]:
    """Every dead letter in a dead-letter directory (files in name order)."""
    storage, root = Storage.for_path(directory, storage_options=storage_options)
    if not storage.exists(root):
        return
    for info in sorted(storage.list_dir(root), key=lambda f: f.name):
        if info.is_dir or not info.name.endswith(".jsonl"):
            continue
        for line in storage.read_bytes(info.path).splitlines():
            if not line.strip():
                continue
            e = json.loads(line)
            raw = (
                base64.b64decode(e["record_base64"])
                if "record_base64" in e
                else e["record"].encode("utf-8")
            )
            yield DeadLetter(
                reason=e["reason"],
                record=raw,
                source=e.get("source", ""),
                position=e.get("position", ""),
                time=e.get("time", ""),
            )
