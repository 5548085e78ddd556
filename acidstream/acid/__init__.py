"""acid: the Hive ACID on-disk format library (names, codecs, snapshots, ORC writer and reader).

Pure library: it knows nothing of the transaction manager or Spark.
"""

from acidstream.acid.directory import AcidState, get_acid_state
from acidstream.acid.errors import AcidFormatError, AcidStreamError
from acidstream.acid.reader import iter_batches, read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.writer import (
    AcidFileWriter,
    OrcWriterOptions,
    write_base,
    write_delete_delta,
    write_delta,
)

__all__ = [
    "AcidFileWriter",
    "AcidFormatError",
    "AcidState",
    "AcidStreamError",
    "OrcWriterOptions",
    "Storage",
    "TableSchema",
    "ValidTxnList",
    "ValidWriteIdList",
    "get_acid_state",
    "iter_batches",
    "read_path",
    "write_base",
    "write_delete_delta",
    "write_delta",
]
