"""compaction: Hive's Initiator, Worker and Cleaner for full-ACID tables (see docs/compaction.md)."""

from compaction.cleaner import Cleaner, CleanOutcome
from compaction.config import CompactorConfig
from compaction.initiator import Initiation, Initiator
from compaction.service import Compactor, PassReport
from compaction.worker import CompactionOutcome, Worker

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
