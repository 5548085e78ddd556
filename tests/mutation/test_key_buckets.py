"""The buckets a MERGE's source keys hash to (``acidstream.mutation.write.key_buckets``):
integer-like keys hashed a column at a time give the buckets Hive's row-by-row hash
gives (``buckets_hit``), and other key types take the row path."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from acidstream.mutation.write import buckets_hit, key_buckets
from acidstream.txn.catalog import TableDef


def _table(
    cols: tuple[tuple[str, str], ...], bucket_cols: tuple[str, ...], n: int, version: int
) -> TableDef:
    return TableDef(
        db="default", name="b", columns=cols, bucket_cols=bucket_cols, num_buckets=n,
        parameters={"transactional": "true", "bucketing_version": str(version)},
    )  # fmt: skip


def test_integer_keys_hit_the_buckets_the_row_hash_finds() -> None:
    rng = np.random.default_rng(5)
    for version in (1, 2):
        table = _table((("id", "bigint"), ("k", "int"), ("v", "string")), ("id", "k"), 64, version)
        for n in (0, 1, 5, 40, 5_000):
            keys = pa.table(
                {"id": pa.array(rng.integers(-(10**12), 10**12, n), pa.int64()),
                 "k": pa.array(rng.integers(-1000, 1000, n), pa.int32())}
            )  # fmt: skip
            rows = zip(keys.column(0).to_pylist(), keys.column(1).to_pylist(), strict=True)
            assert key_buckets(table, keys) == buckets_hit(table, rows), (version, n)
        every = pa.table(
            {
                "id": pa.array(np.arange(20_000), pa.int64()),
                "k": pa.array(np.zeros(20_000, np.int32)),
            }
        )
        assert key_buckets(table, every) is None  # every bucket hit: nothing to prune


def test_string_keys_take_the_row_hash() -> None:
    table = _table((("s", "string"), ("v", "int")), ("s",), 16, 2)
    keys = pa.table({"s": pa.array(["a", "b", None, "zz"])})
    want = buckets_hit(table, [("a",), ("b",), (None,), ("zz",)])
    assert want is not None and key_buckets(table, keys) == want
