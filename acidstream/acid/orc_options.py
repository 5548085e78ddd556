"""ORC writer settings of ACID files (Hive's ``OrcRecordUpdater`` and ORC Java defaults),
rendered for both engines: pyorc's ``Writer`` and pyarrow's ``ORCWriter``."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyorc

from acidstream.acid.errors import ConfigError

__all__ = ["ORC_TABLE_PROPERTIES", "OrcWriterOptions", "check_orc_keys"]

_COMPRESSION = {
    "NONE": pyorc.CompressionKind.NONE,
    "ZLIB": pyorc.CompressionKind.ZLIB,
    "SNAPPY": pyorc.CompressionKind.SNAPPY,
    "ZSTD": pyorc.CompressionKind.ZSTD,
}
_ARROW_NAMES = {"NONE": "uncompressed", "ZLIB": "zlib", "SNAPPY": "snappy", "ZSTD": "zstd"}
# Codecs Hive knows that the writers here cannot produce: LZ4 (pyarrow's raw LZ4 gives no
# way to learn a chunk's decompressed length, which rewriting a tail needs) and LZO.
_UNWRITABLE = ("LZ4", "LZO")

ORC_TABLE_PROPERTIES = (
    "orc.compress",
    "orc.compress.size",
    "orc.stripe.size",
    "orc.row.index.stride",
    "orc.bloom.filter.columns",
    "orc.bloom.filter.fpp",
)
"""The ``orc.*`` table properties the writers apply (Hive's ``OrcConf`` names). Any other
``orc.*`` key is refused by the catalog: a typo (``orc.compres``) would otherwise be
stored and silently ignored, and so would a Hive ORC knob these writers do not apply."""


#: The compression block of pyarrow's encoders of uncompressed files
#: (:meth:`OrcWriterOptions.arrow_encode_kwargs`).
UNCOMPRESSED_ENCODE_BLOCK = 4 * 1024 * 1024
_NEVER_STRIPE = 1 << 40  # a stripe size no piece reaches


@dataclass(frozen=True, kw_only=True)
class OrcWriterOptions:
    """ORC settings of a base writer; deltas derive theirs as Hive does.

    Defaults are ORC Java's (64 MiB stripes, 256 KiB compression blocks, ZLIB,
    index stride 10,000). ``delta_options`` applies ``orc.base.delta.ratio``
    (stripe and buffer divided by 8) and, for streaming, Hive's streaming
    optimizations (no row index, no dictionary).
    """

    compression: str = "ZLIB"
    stripe_size: int = 64 * 1024 * 1024
    compression_block_size: int = 256 * 1024
    row_index_stride: int = 10_000
    dictionary_key_size_threshold: float = 0.8
    base_delta_ratio: int = 8
    batch_size: int = 1024
    bloom_filter_columns: tuple[str, ...] = ()
    bloom_filter_fpp: float = 0.01

    def __post_init__(self) -> None:
        if self.compression.upper() in _UNWRITABLE:
            raise ConfigError(
                f"orc compression {self.compression.upper()} can be read but not written here "
                f"(writable: {', '.join(_COMPRESSION)})"
            )
        if self.compression.upper() not in _COMPRESSION:
            raise ConfigError(
                f"orc compression must be one of {sorted(_COMPRESSION)}, got {self.compression!r}"
            )
        if self.stripe_size <= 0 or self.compression_block_size <= 0 or self.batch_size <= 0:
            raise ConfigError("orc stripe_size, compression_block_size and batch_size must be > 0")
        if self.base_delta_ratio <= 0:
            raise ConfigError("orc base_delta_ratio must be > 0")
        if self.row_index_stride < 0:
            raise ConfigError("orc row_index_stride must be >= 0 (0: no row index)")
        if self.compression_block_size >= 1 << 23:
            # A compressed chunk's 3-byte header holds its length in 23 bits.
            raise ConfigError("orc compression_block_size must be below 8 MiB")
        if not 0.0 < self.bloom_filter_fpp < 1.0:
            raise ConfigError(
                f"orc bloom_filter_fpp must be between 0 and 1 (exclusive), "
                f"got {self.bloom_filter_fpp!r}"
            )

    def for_table(self, parameters: Mapping[str, str]) -> OrcWriterOptions:
        """These settings with the table's ORC properties applied, as Hive's
        ``OrcFile.writerOptions(tableProperties, conf)`` does: a table property wins over
        the writer's setting. This is the one place the ``orc.*`` properties are read
        (:data:`ORC_TABLE_PROPERTIES`); every writer and the compactor call it, and the
        catalog calls it to validate a table before storing it.

        Unknown ``orc.*`` keys are ignored here (the catalog refuses them when a table is
        created, see :func:`check_orc_keys`); a table stored by an older version keeps
        being writable.

        Raises:
            ConfigError: a bad value, naming the property and what it accepts.
        """
        changes: dict[str, Any] = {}
        codec = parameters.get("orc.compress")
        if codec is not None:
            codec = codec.strip().upper()
            if codec in _UNWRITABLE:
                raise ConfigError(
                    f"table property orc.compress={codec}: {codec} can be read but not "
                    f"written here; writable: {', '.join(_COMPRESSION)}"
                )
            if codec not in _COMPRESSION:
                raise ConfigError(
                    f"table property orc.compress={codec}: must be one of {', '.join(_COMPRESSION)}"
                )
            changes["compression"] = codec
        for prop, attr, low in (
            ("orc.compress.size", "compression_block_size", 1),
            ("orc.stripe.size", "stripe_size", 1),
            ("orc.row.index.stride", "row_index_stride", 0),
        ):
            text = parameters.get(prop)
            if text is None:
                continue
            try:
                value = int(text.strip())
            except ValueError:
                raise ConfigError(
                    f"table property {prop} must be an integer, got {text!r}"
                ) from None
            if value < low:
                bound = "> 0" if low else ">= 0"
                raise ConfigError(f"table property {prop} must be {bound}, got {text!r}")
            if attr == "compression_block_size" and value >= 1 << 23:
                # A compressed chunk's 3-byte header holds its length in 23 bits.
                raise ConfigError(f"table property {prop} must be below 8 MiB, got {text!r}")
            changes[attr] = value
        cols = parameters.get("orc.bloom.filter.columns")
        if cols is not None:
            # Hive's comma-separated list; column names are case-insensitive there.
            names = tuple(c.strip().lower() for c in cols.split(",") if c.strip())
            changes["bloom_filter_columns"] = names
        fpp = parameters.get("orc.bloom.filter.fpp")
        if fpp is not None:
            try:
                p = float(fpp.strip())
            except ValueError:
                p = math.nan
            if not 0.0 < p < 1.0:
                raise ConfigError(
                    f"table property orc.bloom.filter.fpp={fpp!r}: must be a number "
                    "between 0 and 1 (exclusive)"
                )
            changes["bloom_filter_fpp"] = p
        if not changes:
            return self
        try:
            return replace(self, **changes)
        except ConfigError as e:
            raise ConfigError(f"the table's ORC properties: {e}") from e

    def bloom_filter_kwargs(self, event_schema: str) -> dict[str, Any]:
        """``bloom_filter_columns`` / ``bloom_filter_fpp`` for pyorc's and pyarrow's
        writers (both take ORC column ids) of a file with ``event_schema``: the table's
        bloom filter columns are the ``row`` struct's fields, as in Hive's ACID files.

        Raises:
            ConfigError: a column the file's ``row`` does not hold (a table stored by an
                older version that did not check the property).
        """
        if not self.bloom_filter_columns:
            return {}
        td = pyorc.TypeDescription.from_string(event_schema)
        ids = set()
        for c in self.bloom_filter_columns:
            try:
                ids.add(td.find_column_id(f"row.{c}"))
            except KeyError:
                raise ConfigError(
                    f"table property orc.bloom.filter.columns names {c!r}, "
                    "which is not a data column of the table"
                ) from None
        return {"bloom_filter_columns": ids, "bloom_filter_fpp": self.bloom_filter_fpp}

    def delta_options(self, *, streaming: bool) -> OrcWriterOptions:
        """Insert-delta settings (``OrcRecordUpdater``): ratio applied; streaming optimizations."""
        opts = replace(
            self,
            stripe_size=max(self.stripe_size // self.base_delta_ratio, 64 * 1024),
            compression_block_size=max(
                self.compression_block_size // self.base_delta_ratio, 4 * 1024
            ),
        )
        if streaming:
            # Bloom filters live in the row index: a table that asks for them keeps it.
            stride = opts.row_index_stride if opts.bloom_filter_columns else 0
            opts = replace(opts, row_index_stride=stride, dictionary_key_size_threshold=0.0)
        return opts

    def arrow_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``pyarrow.orc.ORCWriter`` for these settings."""
        return {
            "file_version": "0.12",
            "stripe_size": self.stripe_size,
            # pyarrow cannot turn the row index off (Hive's streaming writers do, for
            # speed only): a stitched streaming file keeps ORC's default stride.
            "row_index_stride": self.row_index_stride or 10_000,
            "compression": _ARROW_NAMES[self.compression.upper()],
            "compression_strategy": "speed",
            # pyarrow's ORC writer fixes its memory block at 64 KiB and needs the
            # compression block to be a multiple of it (Hive's delta 32 KiB is not).
            "compression_block_size": -(-self.compression_block_size // 65536) * 65536,
            "dictionary_key_size_threshold": self.dictionary_key_size_threshold,
            "padding_tolerance": 0.0,
        }

    def arrow_encode_kwargs(self) -> dict[str, Any]:
        """:meth:`arrow_kwargs` for the pyarrow encoder of a piece of a stitched file
        (``acidstream.acid.orc_stitch``, whose tails declare :meth:`arrow_kwargs`' block).

        Uncompressed, the encoder gets a :data:`UNCOMPRESSED_ENCODE_BLOCK` block, and a
        stripe size it never reaches: an uncompressed file's bytes do not depend on the
        block except for the postscript's ``compressionBlockSize``, and pyarrow's ORC
        writer costs less with a large one (measured, 3 columns, best of 7 x 30:
        1,000 rows 0.72 -> 0.30 ms, 10,000 rows 1.84 -> 1.20 ms per file; 64 KiB ->
        4 MiB). Its stripe decision counts the blocks' capacity, which would cut a
        stripe every 1,024 rows, so the file writer ends such a piece (one stripe)
        itself once the Arrow bytes written into it reach the table's stripe size."""
        kwargs = self.arrow_kwargs()
        if self.compression.upper() == "NONE":
            kwargs["compression_block_size"] = UNCOMPRESSED_ENCODE_BLOCK
            kwargs["stripe_size"] = _NEVER_STRIPE
        return kwargs

    def pyorc_piece_kwargs(self) -> dict[str, Any]:
        """``pyorc.Writer`` settings for a piece the arrow engine writes with pyorc among
        pieces written with :meth:`arrow_kwargs` (``acidstream.acid.orc_stitch`` needs every piece
        of a file to share compression kind and block size; the rest matches too)."""
        a = self.arrow_kwargs()
        block = a["compression_block_size"]
        return {
            "batch_size": self.batch_size,
            "stripe_size": self.stripe_size,
            "row_index_stride": a["row_index_stride"],
            "compression": _COMPRESSION[self.compression.upper()],
            "compression_strategy": pyorc.CompressionStrategy.SPEED,
            "compression_block_size": block,
            "dict_key_size_threshold": self.dictionary_key_size_threshold,
            "padding_tolerance": 0.0,
            "memory_block_size": math.gcd(block, 64 * 1024),
        }

    def pyorc_kwargs(self, *, batch_size: int | None = None) -> dict[str, Any]:
        """Keyword arguments of ``pyorc.Writer`` for these settings."""
        return {
            "batch_size": batch_size or self.batch_size,
            "stripe_size": self.stripe_size,
            "row_index_stride": self.row_index_stride,
            "compression": _COMPRESSION[self.compression.upper()],
            "compression_strategy": pyorc.CompressionStrategy.SPEED,
            "compression_block_size": self.compression_block_size,
            "dict_key_size_threshold": self.dictionary_key_size_threshold,
            "padding_tolerance": 0.0,
            # pyorc requires the compression block to be a multiple of its memory block.
            "memory_block_size": math.gcd(self.compression_block_size, 64 * 1024),
        }


def check_orc_keys(parameters: Mapping[str, str]) -> None:
    """Refuse an ``orc.*`` key the writers do not apply (see :data:`ORC_TABLE_PROPERTIES`).

    Raises:
        ConfigError: naming the key, the closest known one, and the keys understood.
    """
    for key in parameters:
        k = key.strip().lower()
        if not k.startswith("orc.") or key in ORC_TABLE_PROPERTIES:
            continue
        close = difflib.get_close_matches(k, ORC_TABLE_PROPERTIES, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(
            f"table property {key}: not an ORC property acidstream applies; {hint}"
            f"known: {', '.join(ORC_TABLE_PROPERTIES)}"
        )
