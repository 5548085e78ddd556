"""``acidstream read`` streams: its peak memory does not grow with the table."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from acidstream.acid.schema import TableSchema
from acidstream.acid.writer import write_delta

SCHEMA = TableSchema.parse("id bigint, name string, score double, tags array<string>")
ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI in a fresh interpreter and prints that process's own peak RSS (KiB).
# VmHWM, not getrusage: ru_maxrss survives exec, so a child forked from this (large)
# pytest process would report the parent's peak instead of its own.
_PROBE = """
import contextlib, os, re, sys
from acidstream.cli.main import main
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    code = main(sys.argv[1:])
status = open("/proc/self/status").read()
print(code, re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1), file=sys.stderr)
"""


def _table(root: Path, rows: int) -> Path:
    ids = pa.array(range(rows), pa.int64())
    data = pa.table(
        {
            "id": ids,
            "name": pa.array([f"name-{i:012d}" for i in range(rows)]),
            "score": pa.array([i / 7 for i in range(rows)]),
            "tags": pa.array([["a", f"t{i % 97}"] for i in range(rows)]),
        }
    )
    write_delta(str(root), SCHEMA, 1, data)  # one file: the worst case for a materializing read
    return root


def _peak_rss_kib(table: Path, fmt: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, "read", str(table), "--format", fmt],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    code, rss = proc.stderr.strip().splitlines()[-1].split()
    assert code == "0", proc.stderr
    return int(rss)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc (VmHWM)")
@pytest.mark.parametrize("fmt", ["jsonl", "table"])
def test_read_peak_memory_does_not_grow_with_the_table(tmp_path: Path, fmt: str) -> None:
    n = 20_000
    small = _table(tmp_path / "small", n)
    large = _table(tmp_path / "large", 10 * n)
    started = time.monotonic()
    rss_small = _peak_rss_kib(small, fmt)
    rss_large = _peak_rss_kib(large, fmt)
    elapsed = time.monotonic() - started
    print(
        f"{fmt}: peak RSS {rss_small} KiB for {n} rows, {rss_large} KiB for {10 * n} ({elapsed:.1f} s)"
    )
    assert rss_large < 2 * rss_small
    # ...and well below what holding the large table as Python objects takes (about
    # 1 KiB a row here); what remains is the decoded stripe, in Arrow (about 100 B a row).
    assert rss_large - rss_small < 10 * n * 250 // 1024
