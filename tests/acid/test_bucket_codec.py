"""BucketCodec V0/V1 as Hive encodes and decodes it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acidstream.acid import bucket_codec
from acidstream.acid.errors import AcidFormatError


def test_hive_examples() -> None:
    assert bucket_codec.encode(0, 0) == 536870912 == 0x20000000
    assert bucket_codec.encode(1, 0) == 536936448
    assert bucket_codec.encode(3, 2) == 537067522
    assert bucket_codec.encode(2, -1) == 537001984  # statement -1 encodes as 0
    assert bucket_codec.decode(537001984) == (2, 0)


@given(st.integers(0, bucket_codec.MAX_BUCKET_ID), st.integers(0, bucket_codec.MAX_STATEMENT_ID))
def test_v1_round_trip(bucket: int, stmt: int) -> None:
    enc = bucket_codec.encode(bucket, stmt)
    assert bucket_codec.version(enc) == 1
    assert bucket_codec.decode(enc) == (bucket, stmt)
    assert bucket_codec.decode_writer_id(enc) == bucket
    # The layout: 3 version bits, 1 reserved, 12 bucket bits, 4 reserved, 12 statement bits.
    assert enc >> 29 == 1
    assert (enc >> 28) & 1 == 0 and (enc >> 12) & 0xF == 0


@given(st.integers(0, (1 << 29) - 1))
def test_v0_is_the_plain_bucket(value: int) -> None:
    assert bucket_codec.version(value) == 0
    assert bucket_codec.decode(value) == (value, 0)


@given(st.integers(2, 7), st.integers(0, (1 << 29) - 1))
def test_other_versions_are_rejected(v: int, low: int) -> None:
    with pytest.raises(AcidFormatError, match="Version"):
        bucket_codec.decode((v << 29) | low)


def test_out_of_range() -> None:
    with pytest.raises(ValueError):
        bucket_codec.encode(4096, 0)
    with pytest.raises(ValueError):
        bucket_codec.encode(0, 4096)
