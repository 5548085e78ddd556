"""acid: the Hive ACID on-disk format library (names, codecs, snapshots, ORC writer and reader).

Pure library: it knows nothing of the transaction manager or Spark.

The names below are imported on first use (PEP 562), so that importing one module of the
package (``acidstream.acid.errors`` from a Spark data source, say) does not import them all:
every query's fresh Python process pays the imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acidstream.acid.lazy_exports import lazy_exports

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

_EXPORTS = {
    "AcidState": "acidstream.acid.directory",
    "get_acid_state": "acidstream.acid.directory",
    "AcidFormatError": "acidstream.acid.errors",
    "AcidStreamError": "acidstream.acid.errors",
    "iter_batches": "acidstream.acid.reader",
    "read_path": "acidstream.acid.reader",
    "TableSchema": "acidstream.acid.schema",
    "ValidTxnList": "acidstream.acid.snapshot",
    "ValidWriteIdList": "acidstream.acid.snapshot",
    "Storage": "acidstream.acid.storage",
    "AcidFileWriter": "acidstream.acid.writer",
    "OrcWriterOptions": "acidstream.acid.writer",
    "write_base": "acidstream.acid.writer",
    "write_delete_delta": "acidstream.acid.writer",
    "write_delta": "acidstream.acid.writer",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)


if TYPE_CHECKING:
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
