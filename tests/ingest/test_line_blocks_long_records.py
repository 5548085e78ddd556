"""A record longer than one read is split in time linear in its length (issue 28, item 13:
``ingest --max-record-bytes`` above 16 MiB must be usable, not quadratic)."""

from __future__ import annotations

import io
from unittest.mock import patch

import numpy as np
import pytest

from acidstream.ingest import line_blocks
from acidstream.ingest.line_blocks import read_blocks


@pytest.mark.parametrize("limit", [4 << 20, 1 << 20])  # taken whole / skipped as oversize
def test_each_byte_of_a_long_record_is_scanned_once(limit: int) -> None:
    """The delimiter scan sees every input byte once however many reads a record spans
    (it used to rescan the record's bytes so far on every read: 2 MiB in 1 KiB reads
    scanned 2 GiB)."""
    record = b"x" * (2 << 20)
    data = b"a\n" + record + b"\nb\n"
    scanned = 0
    real = line_blocks._delims

    def counting(chunk: bytes) -> np.ndarray:
        nonlocal scanned
        scanned += len(chunk)
        return real(chunk)

    with patch.object(line_blocks, "_CHUNK", 1024), patch.object(line_blocks, "_delims", counting):
        blocks = list(read_blocks(io.BytesIO(data), max_record_bytes=limit))
    records = [r for b in blocks for r in b.records]
    oversize = [(o.start, o.end, o.size) for b in blocks for o in b.oversize]
    if limit > len(record):
        assert records == [b"a", record, b"b"] and oversize == []
    else:
        assert records == [b"a", b"b"] and oversize == [(2, 3 + len(record), len(record))]
    assert scanned <= len(data)
