"""Files written by ``acidstream.acid.writer`` in the shapes the writer must support, for tests.

Each builder returns a ``WrittenFile``: the path, the flush lengths at which a
reader may cut the file (plus ``None`` for the whole file) and the rows each
prefix must hold. Shared by the Python-side tests and the JVM reader tests.
"""

from __future__ import annotations

import datetime
import decimal
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acidstream.acid import bucket_codec, layout
from acidstream.acid.schema import TableSchema
from acidstream.acid.storage import Storage
from acidstream.acid.writer import (
    AcidFileWriter,
    OrcWriterOptions,
    write_base,
    write_delete_delta,
    write_delta,
)

ALL_TYPES = TableSchema.parse(
    "b boolean, t tinyint, s smallint, i int, l bigint, f float, d double, str string, "
    "vc varchar(5), ch char(3), dec decimal(10,2), dt date, ts timestamp, bin binary, "
    "arr array<int>, m map<string,int>, st struct<x:int,y:string>"
)
SIMPLE = TableSchema.parse("id bigint, name string, salary int")


@dataclass
class WrittenFile:
    path: str
    schema: TableSchema
    prefixes: dict[int | None, int] = field(default_factory=dict)  # flush length -> rows
    events: list[tuple[Any, ...]] = field(default_factory=list)  # expected events of the whole file


def all_types_row(i: int) -> tuple[Any, ...]:
    return (
        i % 2 == 0, i % 100, i % 1000, i, i * 1_000_000_007, float(i) / 4, i / 3, f"row {i}",
        "abcde"[: i % 5 + 1], "xyz", decimal.Decimal(i) / 100, datetime.date(2020, 1, 1) + datetime.timedelta(i),
        datetime.datetime(2021, 3, 4, 5, 6, 7) + datetime.timedelta(seconds=i), bytes([i % 256]) * 3,
        [i, i + 1], {"k": i}, (i, str(i)),
    )  # fmt: skip


def simple_rows(n: int, *, seed: int = 0) -> list[tuple[int, str, int]]:
    rnd = random.Random(seed)
    return [(i, f"name-{rnd.getrandbits(40):x}", rnd.randrange(10**6)) for i in range(n)]


def insert_delta(tmp: Path, n: int = 2500) -> WrittenFile:
    rows = [all_types_row(i) for i in range(n)]
    p = write_delta(str(tmp), ALL_TYPES, 7, rows, bucket_id=3, statement_id=2)
    b = bucket_codec.encode(3, 2)
    return WrittenFile(p, ALL_TYPES, {None: n}, [(0, 7, b, i, 7, r) for i, r in enumerate(rows)])


def multi_stripe_delta(tmp: Path, n: int = 120_000) -> WrittenFile:
    rows = simple_rows(n)
    opts = OrcWriterOptions(stripe_size=64 * 1024 * 8, compression_block_size=64 * 1024 * 8)
    p = write_delta(str(tmp), SIMPLE, 1, rows, options=opts)
    b = bucket_codec.encode(0, 0)
    return WrittenFile(p, SIMPLE, {None: n}, [(0, 1, b, i, 1, r) for i, r in enumerate(rows)])


def streaming_batch(
    tmp: Path,
    txn_sizes: tuple[int, ...] = (3, 0, 40_000, 1, 25),
    *,
    engine: str = "pyorc",
    schema: TableSchema = SIMPLE,
) -> WrittenFile:
    """One delta for a batch of txns (write ids 1..n), a flush per txn, the side file kept."""
    storage, root = Storage.for_path(str(tmp))
    lo, hi = 1, len(txn_sizes)
    path = storage.join(root, layout.delta_dir_name(lo, hi), layout.bucket_file_name(1))
    # Small stripes so a big txn spans several stripes between two footers.
    opts = OrcWriterOptions(stripe_size=64 * 1024 * 8)
    out = WrittenFile(path, schema)
    w = AcidFileWriter(
        storage,
        path,
        schema,
        kind="insert",
        bucket_id=1,
        streaming=True,
        side_file=True,
        options=opts,
        engine=engine,  # type: ignore[arg-type]
    )
    b = bucket_codec.encode(1, -1)
    total = 0
    for k, size in enumerate(txn_sizes):
        wid = lo + k
        if schema is SIMPLE:
            rows: list[tuple[Any, ...]] = list(simple_rows(size, seed=wid))
        else:
            # Every third row NULL in all columns: statistics must merge hasNull too.
            rows = [
                tuple([None] * len(schema.columns))
                if (total + i) % 3 == 2
                else all_types_row(total + i)
                for i in range(size)
            ]
        w.insert(wid, rows)
        out.events.extend((0, wid, b, i, wid, r) for i, r in enumerate(rows))
        total += size
        length = w.flush()
        out.prefixes[length] = total
    w.close()
    out.prefixes[None] = total
    return out


def streaming_batch_arrow(tmp: Path) -> WrittenFile:
    """The same transaction batch on the arrow engine (pieces stitched per flush)."""
    return streaming_batch(tmp, engine="arrow")


def streaming_all_types_arrow(tmp: Path) -> WrittenFile:
    """Every Hive type, NULLs included, through stitched pieces: merged statistics."""
    return streaming_batch(tmp, (4, 0, 1500, 1, 30), engine="arrow", schema=ALL_TYPES)


def delete_delta(tmp: Path) -> WrittenFile:
    keys = [(w, bucket_codec.encode(2, 0), r) for w in (1, 3) for r in range(0, 5000, 7)]
    (p,) = write_delete_delta(str(tmp), SIMPLE, 9, reversed(keys))
    return WrittenFile(p, SIMPLE, {None: len(keys)}, [(2, o, b, r, 9, None) for (o, b, r) in keys])


def base_file(tmp: Path) -> WrittenFile:
    rows = simple_rows(1000)
    p = write_base(str(tmp), SIMPLE, 12, rows, visibility_txn_id=40)
    b = bucket_codec.encode(0, 0)
    return WrittenFile(p, SIMPLE, {None: 1000}, [(0, 12, b, i, 12, r) for i, r in enumerate(rows)])


BUILDERS = {
    "insert_delta_all_types": insert_delta,
    "multi_stripe_delta": multi_stripe_delta,
    "streaming_batch": streaming_batch,
    "streaming_batch_arrow": streaming_batch_arrow,
    "streaming_all_types_arrow": streaming_all_types_arrow,
    "delete_delta": delete_delta,
    "base": base_file,
}


def arrow_delta(tmp: Path, n: int = 5000) -> WrittenFile:
    """Columnar input through the pyarrow engine, with char/varchar columns."""
    import pyarrow as pa

    schema = TableSchema.parse(
        "id bigint, code char(4), tag varchar(3), amount decimal(12,3), day date"
    )
    rows = [
        (i, f"c{i % 7}", f"tag{i}", decimal.Decimal(i) / 1000, datetime.date(2024, 1, 1))
        for i in range(n)
    ]
    cols = list(zip(*rows, strict=True))
    table = pa.table(
        {
            "id": pa.array(cols[0], pa.int64()),
            "code": pa.array(cols[1]),
            "tag": pa.array(cols[2]),
            "amount": pa.array(cols[3], pa.decimal128(12, 3)),
            "day": pa.array(cols[4], pa.date32()),
        }
    )
    p = write_delta(str(tmp), schema, 3, table, bucket_id=0, statement_id=1)
    b = bucket_codec.encode(0, 1)
    expect = [(i, c.ljust(4), t[:3], a, d) for (i, c, t, a, d) in rows]
    return WrittenFile(p, schema, {None: n}, [(0, 3, b, i, 3, r) for i, r in enumerate(expect)])


BUILDERS["arrow_delta_char_varchar"] = arrow_delta
