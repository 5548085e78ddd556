"""The row-group reader (``acidstream.acid.orc_row_groups``) against pyarrow's full read.

Random tables (every type the reader decodes, random nulls, sorted / random / repeating
/ outlier values so that every RLE v2 sub-encoding occurs, dictionary and direct
strings), written by pyarrow's ORC writer with random compression, file version (0.11:
RLE v1; 0.12: RLE v2), stripe size and row index stride; random runs of row groups are
decoded and compared with the same rows of ``ORCFile.read_stripe``. A column the reader
does not handle must raise ``Unsupported`` (the caller then reads the stripe with
pyarrow), never return other values.
"""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acidstream.acid.orc_rle import ByteSource, decode_int_rle_v2
from acidstream.acid.orc_row_groups import (
    OrcBytes,
    OrcMeta,
    StripeReader,
    Unsupported,
    group_ranges,
)
from acidstream.acid.storage import Storage


def _ints(rng: np.random.Generator, n: int, style: str, lo: int, hi: int) -> np.ndarray:
    if style == "sorted":  # DELTA runs with varying deltas
        return np.sort(rng.integers(lo, hi, n))
    if style == "constant":  # SHORT_REPEAT / fixed DELTA
        return np.full(n, rng.integers(lo, hi))
    if style == "counter":  # fixed DELTA
        start = int(rng.integers(lo, max(lo + 1, hi - n)))
        return np.clip(np.arange(start, start + n), lo, hi - 1)
    if style == "outliers":  # PATCHED_BASE
        small = rng.integers(0, 64, n)
        big = rng.integers(lo, hi, n)
        return np.where(rng.random(n) < 0.03, big, small)
    return rng.integers(lo, hi, n)  # DIRECT


STYLES = ["sorted", "constant", "counter", "outliers", "random"]


def _table(rng: np.random.Generator, n: int, null_share: float) -> pa.Table:
    def mask() -> np.ndarray | None:
        if null_share == 0:
            return None
        return rng.random(n) < null_share

    cols: dict[str, pa.Array] = {}
    for name, typ, lo, hi in [
        ("i8", pa.int8(), -128, 128),
        ("i16", pa.int16(), -(2**15), 2**15),
        ("i32", pa.int32(), -(2**31), 2**31),
        ("i64", pa.int64(), -(2**62), 2**62),
        ("d", pa.date32(), -100_000, 100_000),
    ]:
        style = STYLES[int(rng.integers(len(STYLES)))]
        vals = _ints(rng, n, style, lo, hi).astype(
            typ.to_pandas_dtype() if typ != pa.date32() else np.int32
        )
        cols[name] = (
            pa.array(vals, mask=mask()).cast(typ)
            if typ != pa.date32()
            else pa.array(vals.astype(np.int32), pa.int32(), mask=mask()).cast(pa.date32())
        )
    cols["b"] = pa.array(rng.random(n) < 0.3, pa.bool_(), mask=mask())
    cols["f32"] = pa.array(rng.standard_normal(n).astype(np.float32), mask=mask())
    cols["f64"] = pa.array(rng.standard_normal(n), mask=mask())
    few = [f"k{i}-é" for i in range(int(rng.integers(1, 40)))]
    cols["s_dict"] = pa.array(
        [few[i] for i in rng.integers(0, len(few), n)], pa.string(), mask=mask()
    )
    cols["s_direct"] = pa.array(
        ["x" * int(k) + str(i) for i, k in enumerate(rng.integers(0, 12, n))],
        pa.string(),
        mask=mask(),
    )
    cols["ts"] = pa.array(
        [
            datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=int(s))
            for s in rng.integers(0, 10**8, n)
        ],
        pa.timestamp("ns"),
    )
    return pa.table(cols)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 30_000),
    null_share=st.sampled_from([0.0, 0.0, 0.05, 0.5, 1.0]),
    compression=st.sampled_from(["uncompressed", "zlib", "snappy", "zstd"]),
    version=st.sampled_from(["0.11", "0.12"]),
    stride=st.sampled_from([1_000, 1_500, 4_096, 10_000]),
    stripe_size=st.sampled_from([64 * 1024, 256 * 1024, 64 * 1024 * 1024]),
    block=st.sampled_from([64 * 1024, 256 * 1024]),
    dict_threshold=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_row_groups_equal_pyarrows_read(
    tmp_path: Path,
    seed: int,
    n: int,
    null_share: float,
    compression: str,
    version: str,
    stride: int,
    stripe_size: int,
    block: int,
    dict_threshold: float,
) -> None:
    rng = np.random.default_rng(seed)
    t = _table(rng, n, null_share)
    path = str(tmp_path / f"f{seed}.orc")
    orc.write_table(
        t,
        path,
        compression=compression,
        file_version=version,
        row_index_stride=stride,
        stripe_size=stripe_size,
        compression_block_size=block,
        dictionary_key_size_threshold=dict_threshold,
    )
    f = orc.ORCFile(path)
    storage, _ = Storage.for_path(path)
    data = OrcBytes(storage, path, length=os.path.getsize(path))
    meta = OrcMeta.of(data.tail())
    decoded = 0
    for s in range(len(meta.stripes)):
        reader = StripeReader(data, meta, s)
        full = f.read_stripe(s)
        assert reader.rows == full.num_rows
        k = int(rng.integers(1, reader.groups + 1))
        groups = sorted(rng.choice(reader.groups, k, replace=False).tolist())
        ranges = group_ranges(groups)
        for i, name in enumerate(t.column_names):
            col = meta.column_id([name])
            assert col == i + 1
            try:
                got = reader.read(col, ranges)
            except Unsupported:
                assert name == "ts" or not reader.supports(col)
                continue
            want = pa.concat_arrays(
                [full.column(i).slice(a * stride, (b - a) * stride) for a, b in ranges]
            )
            assert got.type == want.type, name
            assert got.equals(want), (name, reader.encodings[col])
            decoded += 1
    data.close()
    assert decoded  # every table has columns the reader decodes


def test_unsupported_types_raise_instead_of_decoding(tmp_path: Path) -> None:
    t = pa.table(
        {
            "ts": pa.array([datetime.datetime(2020, 1, 1)] * 50),
            "dec": pa.array([decimal.Decimal("1.25")] * 50, pa.decimal128(10, 2)),
        }
    )
    path = str(tmp_path / "u.orc")
    orc.write_table(t, path, row_index_stride=10)
    storage, _ = Storage.for_path(path)
    data = OrcBytes(storage, path, length=os.path.getsize(path))
    reader = StripeReader(data, OrcMeta.of(data.tail()), 0)
    for col in (1, 2):
        assert not reader.supports(col)
        with pytest.raises(Unsupported):
            reader.read(col, [(0, 1)])
    data.close()


def test_rle_v2_examples_from_the_orc_specification() -> None:
    """The byte examples of the ORC specification's "Run Length Encoding v2" section."""

    def dec(raw: list[int], n: int, *, signed: bool = False) -> list[int]:
        return decode_int_rle_v2(ByteSource(bytes(raw), bytes), signed=signed, count=n).tolist()

    assert dec([0x0A, 0x27, 0x10], 5) == [10000] * 5  # short repeat
    assert dec([0x5E, 0x03, 0x5C, 0xA1, 0xAB, 0x1E, 0xDE, 0xAD, 0xBE, 0xEF], 4) == [
        23713,
        43806,
        57005,
        48879,
    ]  # direct
    assert dec(
        [0x8E, 0x13, 0x2B, 0x21, 0x07, 0xD0, 0x1E, 0x00, 0x14, 0x70, 0x28, 0x32, 0x3C, 0x46,
         0x50, 0x5A, 0x64, 0x6E, 0x78, 0x82, 0x8C, 0x96, 0xA0, 0xAA, 0xB4, 0xBE, 0xFC, 0xE8],
        20,
    ) == [2030, 2000, 2020, 1000000, 2040, 2050, 2060, 2070, 2080, 2090, 2100, 2110, 2120,
          2130, 2140, 2150, 2160, 2170, 2180, 2190]  # patched base  # fmt: skip
    assert dec([0xC6, 0x09, 0x02, 0x02, 0x22, 0x42, 0x42, 0x46], 10) == [
        2, 3, 5, 7, 11, 13, 17, 19, 23, 29
    ]  # delta  # fmt: skip
