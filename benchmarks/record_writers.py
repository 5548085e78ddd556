"""Record-writer benchmark: ``encode_block`` rows/s against the Arrow floor, per writer.

For each writer, 300,000 lines of ``id int, s string, amount double`` go through
``BoundRecordWriter.encode_block``; the floor is Arrow alone on the same lines in the same run
(``pyarrow.json.read_json`` / ``pyarrow.csv.read_csv`` / ``pyarrow.compute.extract_regex``)
plus a pyarrow ORC write of the same rows in the ACID event shape (pyarrow's defaults, as the
issue defines the floor; uncompressed). The connection scenarios also print, with no target,
the ratio against a floor writing the writers' own file settings (ZLIB, Hive's default codec;
``FILE_SETTINGS``). Targets (ratio of
encode_block rows/s to floor rows/s): JSON and delimited >= 0.5, regex >= 0.4. The last
column also charges encode_block with that ORC write (parse + write on both sides).

The ``*-connection`` scenarios measure the path users take, end to end: the same lines through
``StreamingConnection.write_block`` in 10,000-row txns, transaction batches of 10, committed to a
table (the targets of issue 17 apply to them too). ``ingest`` runs ``acidstream ingest`` on a
1,000,000-line JSON file and prints its peak RSS. Scenarios are registered in ``SCENARIOS``.

Usage: python benchmarks/record_writers.py [--rows 300000] [--repeat 3] [--only json,regex]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.orc as pa_orc

from acid.orc_options import OrcWriterOptions
from acid.schema import TableSchema
from ingest.record_writers import (
    RecordWriter,
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)

SCHEMA = TableSchema.parse("id int, s string, amount double")
REGEX = r"(\d+)\|([^|]*)\|(.*)"
TARGETS = {"json": 0.5, "delimited": 0.5, "regex": 0.4}


@dataclass(frozen=True)
class Result:
    """One scenario's figures: rows/s of the thing measured and of its floor."""

    name: str
    rows: int
    seconds: float
    floor_seconds: float
    target: float | None
    #: The measured thing plus the floor's ORC write (None when not measured).
    seconds_with_write: float | None = None
    #: The floor writing the writers' own file settings (ZLIB; printed for comparison, no target).
    same_codec_floor_seconds: float | None = None

    @property
    def ratio(self) -> float:
        return self.floor_seconds / self.seconds

    @property
    def ratio_with_write(self) -> float | None:
        if self.seconds_with_write is None:
            return None
        return self.floor_seconds / self.seconds_with_write


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _lines(kind: str, n: int) -> list[bytes]:
    rnd = random.Random(11)
    amounts = [round(rnd.uniform(-1e6, 1e6), 2) for _ in range(n)]
    names = [f"name-{rnd.getrandbits(32):08x}" for _ in range(n)]
    if kind == "json":
        return [
            f'{{"id": {i}, "s": "{s}", "amount": {a}}}'.encode()
            for i, s, a in zip(range(n), names, amounts, strict=True)
        ]
    sep = "\x01" if kind == "delimited" else "|"
    return [
        f"{i}{sep}{s}{sep}{a}".encode() for i, s, a in zip(range(n), names, amounts, strict=True)
    ]


FILE_SETTINGS = OrcWriterOptions().delta_options(streaming=True).arrow_kwargs()
"""The pyarrow ORC settings of the files the writers produce (a streaming insert delta:
ZLIB, Hive's default codec, and its block and stripe sizes), for the informative same-codec floor."""


def _orc_event_write(rows: pa.Table, *, same_codec: bool = False) -> None:
    """pyarrow ORC write of the rows in the ACID event shape (the floor's write half), with
    pyarrow's defaults (the issue's floor) or, ``same_codec``, the writers' own settings."""
    n = rows.num_rows
    row_struct = pa.StructArray.from_arrays(
        [c.combine_chunks() for c in rows.columns], names=rows.column_names
    )
    events = pa.table(
        {
            "operation": pa.array(np.zeros(n, np.int32)),
            "originalTransaction": pa.array(np.ones(n, np.int64)),
            "bucket": pa.array(np.full(n, 536870912, np.int32)),
            "rowId": pa.array(np.arange(n, dtype=np.int64)),
            "currentTransaction": pa.array(np.ones(n, np.int64)),
            "row": row_struct,
        }
    )
    if same_codec:
        pa_orc.write_table(events, io.BytesIO(), **FILE_SETTINGS)
    else:
        pa_orc.write_table(events, io.BytesIO())  # the floor: pyarrow's defaults


def _arrow_parse(kind: str, data: bytes, strings: pa.Array) -> pa.Table:
    arrow_schema = SCHEMA.arrow_schema()
    if kind == "json":
        return pa_json.read_json(
            io.BytesIO(data),
            parse_options=pa_json.ParseOptions(explicit_schema=arrow_schema),
        )
    if kind == "delimited":
        return pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(column_names=list(SCHEMA.names)),
            parse_options=pa_csv.ParseOptions(delimiter="\x01", quote_char=False),
            convert_options=pa_csv.ConvertOptions(column_types=arrow_schema),
        )
    groups = pc.extract_regex(strings, r"^(?P<id>\d+)\|(?P<s>[^|]*)\|(?P<amount>.*)$")
    return pa.table(
        [
            pc.cast(groups.field("id"), pa.int32()),
            groups.field("s"),
            pc.cast(groups.field("amount"), pa.float64()),
        ],
        names=list(SCHEMA.names),
    )


def _writer(kind: str) -> RecordWriter:
    if kind == "json":
        return StrictJsonWriter()
    if kind == "delimited":
        return StrictDelimitedInputWriter()
    return StrictRegexWriter(regex=REGEX)


def bench_encode_block(kind: str, n: int, repeat: int) -> Result:
    """encode_block of n lines vs Arrow's parse of the same lines + ORC event write."""
    lines = _lines(kind, n)
    data = b"\n".join(lines)
    strings = pa.array(lines, pa.binary()).cast(pa.string())
    bound = _writer(kind).bind(SCHEMA)
    block = bound.encode_block(lines)
    if block.table.num_rows != n or block.rejected:
        raise SystemExit(f"[{kind}] encode_block lost rows: {len(block.rejected)} rejected")
    parsed = _arrow_parse(kind, data, strings)
    if parsed.num_rows != n:
        raise SystemExit(f"[{kind}] the floor parsed {parsed.num_rows} rows")

    def floor() -> None:
        _orc_event_write(_arrow_parse(kind, data, strings))

    floor_s = _best(floor, repeat)
    ours = _best(lambda: bound.encode_block(lines), repeat)
    with_write = _best(lambda: _orc_event_write(bound.encode_block(lines).table), repeat)
    return Result(f"{kind} encode_block", n, ours, floor_s, TARGETS[kind], with_write)


def _floor_seconds(
    kind: str, lines: list[bytes], repeat: int, *, same_codec: bool = False
) -> float:
    data = b"\n".join(lines)
    strings = pa.array(lines, pa.binary()).cast(pa.string())
    return _best(
        lambda: _orc_event_write(_arrow_parse(kind, data, strings), same_codec=same_codec),
        repeat,
    )


def _fresh_table(root: str) -> Any:
    from txn.catalog import TableDef
    from txn.store import open_store

    store = open_store(f"sqlite:///{root}/metastore.db", warehouse=root)
    store.create_table(
        TableDef(db="default", name="t", columns=tuple((n, str(t)) for n, t in SCHEMA.columns),
                 parameters={"transactional": "true"})
    )  # fmt: skip
    return store


def bench_connection(kind: str, n: int, repeat: int) -> Result:
    """The lines through ``StreamingConnection.write_block`` (10,000-row txns, transaction
    batches of 10, committed) vs the same Arrow floor: the path ``acidstream ingest``, the
    HTTP server and API users take."""
    from ingest.connection import StreamingConnection, StreamingOptions

    lines = _lines(kind, n)
    floor_s = _floor_seconds(kind, lines, repeat)
    zlib_floor_s = _floor_seconds(kind, lines, repeat, same_codec=True)
    times = []
    for _ in range(repeat):
        root = tempfile.mkdtemp(prefix="acid_rw_")
        store = _fresh_table(root)  # setup, not timed
        try:
            t0 = time.perf_counter()
            with StreamingConnection(
                "t", record_writer=_writer(kind), store=store,
                options=StreamingOptions(txns_per_batch=10, housekeeping_interval_s=None),
            ) as conn:  # fmt: skip
                for i in range(0, n, 10_000):
                    conn.begin_transaction()
                    res = conn.write_block(lines[i : i + 10_000])
                    if res.rejected:
                        raise SystemExit(f"[{kind}] {len(res.rejected)} lines rejected")
                    conn.commit_transaction()
            times.append(time.perf_counter() - t0)
        finally:
            store.close()
            shutil.rmtree(root, ignore_errors=True)
    return Result(
        f"{kind} StreamingConnection",
        n,
        min(times),
        floor_s,
        TARGETS[kind],
        same_codec_floor_seconds=zlib_floor_s,
    )


def bench_ingest_cli(_n: int, repeat: int) -> Result:
    """``acidstream ingest`` of a 1,000,000-line JSON file (a subprocess; its peak RSS is
    printed) vs the Arrow floor on the same lines. No target in the issue: reported."""
    n = 1_000_000
    lines = _lines("json", n)
    floor_s = _floor_seconds("json", lines, repeat)
    root = tempfile.mkdtemp(prefix="acid_ingest_")
    try:
        src = os.path.join(root, "in.jsonl")
        with open(src, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        # the child prints its own peak RSS at exit (ru_maxrss of children is not reliable)
        child = (
            "import atexit, runpy, sys\n"
            "def hwm():\n"
            "    for ln in open('/proc/self/status'):\n"
            "        if ln.startswith('VmHWM:'): print('PEAK_RSS_KB', ln.split()[1], file=sys.stderr)\n"
            "atexit.register(hwm)\n"
            "sys.argv = ['acidstream'] + sys.argv[1:]\n"
            "runpy.run_module('acidstream', run_name='__main__')\n"
        )
        times, peaks = [], []
        for k in range(repeat):
            wh = os.path.join(root, f"wh{k}")
            env = {**os.environ, "ACIDSTREAM_WAREHOUSE": wh}
            env.pop("ACIDSTREAM_METASTORE", None)
            subprocess.run([sys.executable, "-m", "acidstream", "create-table", "t",
                            "id int, s string, amount double"], env=env, check=True)  # fmt: skip
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", child, "ingest", "t", "--format", "json",
                 "--txn-rows", "100000", src], env=env, capture_output=True, text=True,
            )  # fmt: skip
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"ingest failed: {proc.stderr[-500:]}")
            peaks += [
                int(x.split()[1]) for x in proc.stderr.splitlines() if x.startswith("PEAK_RSS_KB")
            ]
        print(f"  acidstream ingest peak RSS: {max(peaks) / 1024:,.0f} MiB", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Result("json acidstream ingest (1M)", n, min(times), floor_s, None)


SCENARIOS: dict[str, Callable[[int, int], Result]] = {
    "json": lambda n, r: bench_encode_block("json", n, r),
    "delimited": lambda n, r: bench_encode_block("delimited", n, r),
    "regex": lambda n, r: bench_encode_block("regex", n, r),
    "json-connection": lambda n, r: bench_connection("json", n, r),
    "delimited-connection": lambda n, r: bench_connection("delimited", n, r),
    "regex-connection": lambda n, r: bench_connection("regex", n, r),
    "ingest": bench_ingest_cli,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    args = ap.parse_args(argv)
    names = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    failed = False
    print(
        f"{'scenario':<26} {'rows/s':>12} {'floor rows/s':>13} {'ratio':>6} {'target':>7} "
        f"{'ratio incl. ORC write':>22}"
    )
    for name in names:
        r = SCENARIOS[name](args.rows, args.repeat)
        ok = r.target is None or r.ratio >= r.target
        failed |= not ok
        target = "-" if r.target is None else f">={r.target}"
        with_write = "-" if r.ratio_with_write is None else f"{r.ratio_with_write:.2f}"
        print(
            f"{r.name:<26} {r.rows / r.seconds:>12,.0f} {r.rows / r.floor_seconds:>13,.0f} "
            f"{r.ratio:>6.2f} {target:>7} {with_write:>22}{'' if ok else '  BELOW TARGET'}",
            flush=True,
        )
        if r.same_codec_floor_seconds is not None:
            print(
                f"{'':<26} (against a floor writing the writers' ZLIB files, "
                f"{r.rows / r.same_codec_floor_seconds:,.0f} rows/s: "
                f"{r.same_codec_floor_seconds / r.seconds:.2f}; no target)",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
