"""recovery: crash recovery and housekeeping of the metastore (``docs/housekeeping.md``)."""

from recovery.housekeeper import Housekeeper, HousekeepingReport

__all__ = ["Housekeeper", "HousekeepingReport"]
