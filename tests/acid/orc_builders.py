"""Test helpers that lay out ACID tables: corpus files placed as a case describes, and
plain (original / non-ACID) ORC files. ACID files themselves come from ``acidstream.acid.writer``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc

from acidstream.acid.side_file import encode_flush_length

__all__ = ["place", "write_original", "write_side_file"]


def place(src: Path, dst: Path, *, copy: bool = False) -> Path:
    """Put a corpus file at ``dst`` (a symlink unless ``copy``); never writes into the corpus."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if copy:
        shutil.copyfile(src, dst)
    else:
        os.symlink(src, dst)
    return dst


def write_original(
    path: Path, columns: dict[str, Sequence[Any]], *, types: dict[str, pa.DataType]
) -> Path:
    """A plain ORC file (no ACID columns, no user metadata), like a pre-ACID ``000000_0``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({k: pa.array(v, types[k]) for k, v in columns.items()})
    orc.write_table(table, str(path))
    return path


def write_side_file(data_file: Path, lengths: Sequence[int], *, raw: bytes | None = None) -> Path:
    """A ``_flush_length`` side file holding big-endian longs (or ``raw`` bytes)."""
    side = Path(str(data_file) + "_flush_length")
    side.write_bytes(raw if raw is not None else b"".join(encode_flush_length(n) for n in lengths))
    return side
