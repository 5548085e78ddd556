"""compaction: Hive's Initiator, Worker and Cleaner for full-ACID tables (see docs/compaction.md)."""

from acidstream.compaction.cleaner import Cleaner, CleanOutcome
from acidstream.compaction.config import CompactorConfig
from acidstream.compaction.initiator import Initiation, Initiator
from acidstream.compaction.service import Compactor, PassReport
from acidstream.compaction.worker import CompactionOutcome, Worker

__all__ = [
    "CleanOutcome",
    "Cleaner",
    "CompactionOutcome",
    "Compactor",
    "CompactorConfig",
    "Initiation",
    "Initiator",
    "PassReport",
    "Worker",
]
