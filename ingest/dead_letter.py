"""Dead-letter file for records that could not be converted (never silently dropped)."""

from __future__ import annotations

import base64
import json
import os
import threading
import time

__all__ = ["DeadLetterFile"]


class DeadLetterFile:
    """Appends one JSON line per bad record: when, why, and the record (UTF-8 text when it
    decodes, else base64), flushed at once so nothing is lost on a crash."""

    def __init__(self, path: str) -> None:
        self.path = path
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        self._f = open(path, "ab")
        self._lock = threading.Lock()
        self.count = 0

    def add(self, record: bytes, reason: str, *, source: str = "") -> None:
        try:
            text: dict[str, str] = {"record": record.decode("utf-8")}
        except UnicodeDecodeError:
            text = {"record_base64": base64.b64encode(record).decode()}
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "reason": reason,
            **text,
        }
        if source:
            entry["source"] = source
        with self._lock:
            self._f.write(json.dumps(entry).encode() + b"\n")
            self._f.flush()
            self.count += 1

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                os.fsync(self._f.fileno())
                self._f.close()
