"""ORC bloom filters read back (``acidstream.acid.orc_bloom``): our hashes are ORC's.

pyarrow's ORC writer (ORC C++, the same algorithm as ORC Java and Hive) writes the
filters; every value written must test "maybe" in its own row group (a "no" for a
present value would make a MERGE miss a row), and values not written must mostly test
"no" (else the filters prune nothing)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from acidstream.acid.orc_bloom import double_hashes, long_hashes, parse_bloom_index, string_hash
from acidstream.acid.orc_row_groups import BLOOM_FILTER_UTF8, OrcBytes, OrcMeta, StripeReader
from acidstream.acid.storage import Storage

STRIDE = 1_000


def _hashes(name: str, values: np.ndarray | list[str]) -> np.ndarray:
    if name == "s":
        return np.array([string_hash(v.encode()) for v in values], dtype=np.int64)
    if name == "f":
        return double_hashes(np.asarray(values))
    return long_hashes(np.asarray(values))


@pytest.mark.parametrize("fpp", [0.01, 0.05])
def test_written_values_test_maybe_and_others_mostly_no(tmp_path: Path, fpp: float) -> None:
    rng = np.random.default_rng(7)
    n = 8 * STRIDE
    ids = rng.choice(2**62, n, replace=False).astype(np.int64) - 2**61
    t = pa.table(
        {
            "id": pa.array(ids),
            "i": pa.array(rng.integers(-(2**31), 2**31, n).astype(np.int32)),
            "s": pa.array([f"key-{v}-ü" for v in ids]),
            "f": pa.array(rng.standard_normal(n)),
        }
    )
    path = str(tmp_path / "b.orc")
    # ORC column ids: 0 is the root struct, the fields are 1..4.
    orc.write_table(
        t, path, row_index_stride=STRIDE, bloom_filter_columns=[1, 2, 3, 4], bloom_filter_fpp=fpp
    )
    storage, _ = Storage.for_path(path)
    data = OrcBytes(storage, path, length=os.path.getsize(path))
    reader = StripeReader(data, OrcMeta.of(data.tail()), 0)
    for col, name in enumerate(t.column_names, start=1):
        raw = reader.stream_bytes(col, BLOOM_FILTER_UTF8)
        assert raw is not None, name
        blooms = parse_bloom_index(raw)
        assert len(blooms) == reader.groups == n // STRIDE
        values = t.column(name).to_numpy(zero_copy_only=False)
        for g, bf in enumerate(blooms):
            own = values[g * STRIDE : (g + 1) * STRIDE]
            assert bf.may_contain(_hashes(name, list(own) if name == "s" else own)).all(), name
            other = values[((g + 1) % len(blooms)) * STRIDE :][:STRIDE]
            fp = bf.may_contain(_hashes(name, list(other) if name == "s" else other)).mean()
            assert fp < 4 * fpp, (name, g, fp)
    data.close()
