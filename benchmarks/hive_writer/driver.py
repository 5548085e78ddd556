"""Hive 2.3's own ACID writer as a benchmark peer: compile and run ``HiveWriterBench.java``.

The Java program (beside this module) drives ``OrcRecordUpdater`` from the pyspark wheel's
``hive-exec-2.3.10-core.jar`` the way Hive 2.3's hcatalog streaming API does (see its header);
this module compiles it with ``javac`` into a temporary directory, writes the benchmark's rows
to a file, runs every case in one JVM (the JVM start, class loading and an untimed warm-up stay
outside the timings, which the program takes itself and prints as JSON lines), and reads each
table it wrote back with ``acidstream read`` to check the row count and the sum of the ids.

Only the benchmarks use this module; it is not part of the ``acidstream`` package.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from acidstream.acid.errors import AcidStreamError

__all__ = [
    "HiveCase",
    "HivePeerError",
    "HivePeerUnavailable",
    "HiveResult",
    "HiveWriter",
    "ReadBack",
]

JAVA_SOURCE = Path(__file__).resolve().parent / "HiveWriterBench.java"
"""The committed Java source; compiled at run time, never shipped as a class file."""

# What Spark itself passes to a Java 17 JVM: Hive 2.3's StringInternUtils and Hadoop reach
# into these JDK internals by reflection and fail at class initialisation without them.
_ADD_OPENS = tuple(
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.lang",
        "java.lang.invoke",
        "java.io",
        "java.net",
        "java.nio",
        "java.util",
        "java.util.concurrent",
        "sun.nio.ch",
    )
)

MODES = ("objects", "delimited")
"""Row input of Hive's writer: typed writables (``objects``) or records parsed by
LazySimpleSerDe as ``StrictDelimitedInputWriter`` does (``delimited``)."""


class HivePeerError(AcidStreamError):
    """Hive's writer ran but failed, or its table did not read back as written."""


class HivePeerUnavailable(HivePeerError):
    """Hive's writer cannot run here: no ``java``/``javac`` or no pyspark jars."""


@dataclass(frozen=True, kw_only=True)
class HiveCase:
    """One timed run of Hive's writer.

    Attributes:
        name: the case's name (a directory name: letters, digits, ``-`` and ``_``).
        rows_per_txn: rows inserted per transaction.
        txns: transactions; they take the rows file's first ``rows_per_txn * txns`` rows.
        txns_per_batch: transactions per transaction batch (one delta file per batch).
        fsync: also fsync the bucket file and its side file at each commit.
        mode: one of :data:`MODES`.
    """

    name: str
    rows_per_txn: int
    txns: int
    txns_per_batch: int
    fsync: bool
    mode: str = "objects"

    def __post_init__(self) -> None:
        if not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"case name must be letters, digits, - and _: {self.name!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}: {self.mode!r}")


@dataclass(frozen=True, kw_only=True)
class ReadBack:
    """What ``acidstream read`` returned for a table Hive's writer wrote."""

    rows: int
    id_sum: int
    seconds: float


@dataclass(frozen=True, kw_only=True)
class HiveResult:
    """One case's figures, as the Java program measured them.

    Attributes:
        case: the case run.
        seconds: wall seconds from the first updater's creation to the last close.
        cpu_seconds: CPU seconds of the whole JVM (GC and JIT threads included) in that time.
        rows: rows inserted.
        files: bucket files written (one per transaction batch).
        table_dir: the table directory written.
        read_back: the check by ``acidstream read`` (``None`` until :meth:`HiveWriter.read_back`).
    """

    case: HiveCase
    seconds: float
    cpu_seconds: float
    rows: int
    files: int
    table_dir: Path
    read_back: ReadBack | None = None


def pyspark_jars() -> Path:
    """The pyspark wheel's jar directory (Hive 2.3, Hadoop, ORC), without starting Spark."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise HivePeerUnavailable("pyspark is not installed (its jars hold Hive's writer)")
    jars = Path(spec.origin).parent / "jars"
    if not any(jars.glob("hive-exec-*.jar")):
        raise HivePeerUnavailable(f"no hive-exec jar in {jars}")
    return jars


class HiveWriter:
    """Compiles the Java peer once into a temporary directory and runs cases with it.

    Use as a context manager; the temporary directory (classes, rows files, tables) is removed
    on exit.
    """

    def __init__(self, *, work_dir: Path | None = None) -> None:
        java = shutil.which("java")
        javac = shutil.which("javac")
        if java is None or javac is None:
            raise HivePeerUnavailable("java and javac are needed (a JDK 17)")
        self._java = java
        self._javac = javac
        self._jars = pyspark_jars()
        self._own_dir = work_dir is None
        self.work_dir = (
            Path(tempfile.mkdtemp(prefix="hive_peer_")) if work_dir is None else work_dir
        )
        self._classes = self.work_dir / "classes"
        self._compiled = False
        self._runs = 0

    def __enter__(self) -> HiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    @property
    def _classpath(self) -> str:
        return f"{self._classes}:{self._jars}/*"

    def compile(self) -> None:
        """``javac`` the program against pyspark's jars (once)."""
        if self._compiled:
            return
        self._classes.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [
                self._javac,
                "-nowarn",
                "-cp",
                f"{self._jars}/*",
                "-d",
                str(self._classes),
                str(JAVA_SOURCE),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise HivePeerError(f"javac {JAVA_SOURCE.name} failed: {proc.stderr.strip()[-2000:]}")
        self._compiled = True

    def run(
        self, rows: Iterable[tuple[int, str, int]], cases: Sequence[HiveCase]
    ) -> list[HiveResult]:
        """Runs ``cases`` in one JVM over ``rows`` (written to a file first, loaded before any
        timing) and returns their figures in order."""
        self.compile()
        self._runs += 1
        run_dir = self.work_dir / f"run{self._runs}"
        run_dir.mkdir()
        rows_file = run_dir / "rows.tsv"
        with open(rows_file, "w", encoding="utf-8") as f:
            # Tab-separated: the benchmark's names never hold a tab or a newline.
            f.writelines(f"{i}\t{n}\t{s}\n" for i, n, s in rows)
        cmd = [self._java, *_ADD_OPENS, "-cp", self._classpath, "HiveWriterBench"]
        cmd += ["--rows", str(rows_file), "--warmup", str(run_dir / "warmup")]
        for c in cases:
            spec = (c.name, str(run_dir / c.name), c.rows_per_txn, c.txns, c.txns_per_batch)
            cmd += ["--case", ",".join(map(str, (*spec, int(c.fsync), c.mode)))]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise HivePeerError(f"HiveWriterBench failed: {proc.stderr.strip()[-3000:]}")
        by_name = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                rec = json.loads(line)
                by_name[rec["name"]] = rec
        for name, rec in by_name.items():
            # The warm-up checked, after each commit, that the file on disk is at least as long
            # as the side file says: hflush handed the bytes to the OS, so an fsync of the
            # file makes them durable and "no fsync" means Hive's hflush semantics.
            if name.startswith("warmup") and not rec["flush_visible"]:
                raise HivePeerError(f"{name}: a flush did not reach the file on disk")
        results = []
        for c in cases:
            rec = by_name.get(c.name)
            if rec is None:
                raise HivePeerError(f"HiveWriterBench printed no result for {c.name}")
            results.append(
                HiveResult(
                    case=c,
                    seconds=float(rec["seconds"]),
                    cpu_seconds=float(rec["cpu_seconds"]),
                    rows=int(rec["rows"]),
                    files=int(rec["files"]),
                    table_dir=run_dir / c.name,
                )
            )
        return results

    @staticmethod
    def read_back(result: HiveResult, *, expected_id_sum: int) -> HiveResult:
        """Reads ``result``'s table with ``acidstream read`` (the CLI, ids only; not timed into
        any figure) and returns ``result`` with what it found.

        Raises:
            HivePeerError: the CLI failed, or the rows or the sum of their ids differ from what
                Hive's writer was given.
        """
        cli = Path(sys.executable).parent / "acidstream"
        cmd = [str(cli)] if cli.exists() else [sys.executable, "-m", "acidstream.cli.main"]
        cmd += ["read", str(result.table_dir), "--columns", "id", "--format", "jsonl"]
        t0 = time.perf_counter()
        n = 0
        total = 0
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE gives both
                raise HivePeerError("acidstream read: no pipes")
            for line in proc.stdout:
                n += 1
                total += json.loads(line)["id"]
            err = proc.stderr.read()
        if proc.returncode != 0:
            raise HivePeerError(f"acidstream read {result.table_dir} failed: {err.strip()}")
        if (n, total) != (result.rows, expected_id_sum):
            raise HivePeerError(
                f"{result.case.name}: acidstream read found {n:,} rows (id sum {total}), "
                f"Hive's writer was given {result.rows:,} (id sum {expected_id_sum})"
            )
        back = ReadBack(rows=n, id_sum=total, seconds=time.perf_counter() - t0)
        return dataclasses.replace(result, read_back=back)
