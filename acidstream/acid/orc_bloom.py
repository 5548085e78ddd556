"""ORC bloom filters (``orc.bloom.filter.columns``), read back to rule row groups out.

Hive's writers (and ORC's C++ writer behind pyarrow and pyorc) store one bloom filter
per row group of each bloom-filter column in the stripe's index section
(``BLOOM_FILTER_UTF8`` streams; older Java writers ``BLOOM_FILTER``). A key lookup
asks, for every key at once, whether a row group may hold it: a "no" is certain, so the
row group is not decoded.

Hashing is ORC's (``org.apache.orc.util.BloomFilter``): integers, dates and doubles (as
their IEEE bits) go through Thomas Wang's 64-bit hash (``getLongHash``), strings through
ORC's Murmur3 ``hash64`` of their UTF-8 bytes; the ``k`` bit positions are
``hash1 + i * hash2`` (32-bit) for ``i = 1..k``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acidstream.acid.protobuf import LEN, VARINT, decode_fields

__all__ = ["BloomFilter", "long_hashes", "parse_bloom_index", "string_hash"]

_M64 = (1 << 64) - 1


@dataclass(frozen=True)
class BloomFilter:
    """One row group's bloom filter: ``k`` hash functions over ``bits`` (uint64 words)."""

    k: int
    bits: np.ndarray

    @property
    def num_bits(self) -> int:
        return len(self.bits) * 64

    def may_contain(self, hashes: np.ndarray) -> np.ndarray:
        """For each 64-bit hash (int64), whether its value may be in the row group."""
        if self.num_bits == 0:
            return np.ones(len(hashes), dtype=bool)
        h = hashes.astype(np.int64, copy=False)
        h1 = h.astype(np.int32)  # the low 32 bits, as a signed int
        h2 = (h.view(np.uint64) >> np.uint64(32)).astype(np.uint32).view(np.int32)
        out = np.ones(len(h), dtype=bool)
        with np.errstate(over="ignore"):
            for i in range(1, self.k + 1):
                c = (h1 + np.int32(i) * h2).astype(np.int32)
                c = np.where(c < 0, ~c, c).astype(np.int64)
                pos = c % self.num_bits
                word = self.bits[pos >> 6]
                out &= ((word >> (pos & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)
        return out


def parse_bloom_index(raw: bytes) -> list[BloomFilter]:
    """A ``BloomFilterIndex`` stream (decompressed): one filter per row group."""
    out: list[BloomFilter] = []
    for num, _, v in decode_fields(raw):
        if num != 1 or not isinstance(v, bytes):
            continue
        k = 0
        words: np.ndarray = np.zeros(0, dtype=np.uint64)
        for n, w, x in decode_fields(v):
            if n == 1 and w == VARINT:
                assert isinstance(x, int)
                k = x
            elif n in (2, 3) and w == LEN:  # bitset (packed fixed64) / utf8bitset
                assert isinstance(x, bytes)
                words = np.frombuffer(x, dtype="<u8").astype(np.uint64)
        out.append(BloomFilter(k, words))
    return out


def long_hashes(values: np.ndarray) -> np.ndarray:
    """ORC's ``getLongHash`` of int64 values (Java ``long`` arithmetic: wrapping
    multiplications, arithmetic right shifts)."""
    key = values.astype(np.int64)
    with np.errstate(over="ignore"):
        key = (~key) + (key << np.int64(21))
        key = key ^ (key >> np.int64(24))
        key = (key + (key << np.int64(3))) + (key << np.int64(8))
        key = key ^ (key >> np.int64(14))
        key = (key + (key << np.int64(2))) + (key << np.int64(4))
        key = key ^ (key >> np.int64(28))
        key = key + (key << np.int64(31))
    return key


def double_hashes(values: np.ndarray) -> np.ndarray:
    """Doubles hash as their IEEE bits (``Double.doubleToLongBits``: one NaN)."""
    v = values.astype(np.float64)
    bits = v.view(np.int64).copy()
    bits[np.isnan(v)] = 0x7FF8000000000000
    return long_hashes(bits)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    h ^= h >> 33
    return h


def string_hash(data: bytes, seed: int = 104729) -> int:
    """ORC's ``Murmur3.hash64`` of some bytes, as a signed 64-bit int."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h = seed & _M64
    n = len(data) >> 3
    for i in range(n):
        k = int.from_bytes(data[8 * i : 8 * i + 8], "little")
        k = (k * c1) & _M64
        k = _rotl(k, 31)
        k = (k * c2) & _M64
        h ^= k
        h = (_rotl(h, 27) * 5 + 0x52DCE729) & _M64
    tail = data[8 * n :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & _M64
        k = _rotl(k, 31)
        k = (k * c2) & _M64
        h ^= k
    h ^= len(data)
    h = _fmix(h)
    return h - (1 << 64) if h >= 1 << 63 else h
