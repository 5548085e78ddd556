"""Errors of the Kafka source: they live with the layer that raises them (the root,
:class:`~acidstream.acid.errors.AcidStreamError`, stays in ``acid/errors.py``)."""

from __future__ import annotations

from acidstream.acid.errors import AcidStreamError

__all__ = ["DataLossError", "SourceError"]


class SourceError(AcidStreamError):
    """Kafka could not be read: broker unreachable, topic unknown, lookups failed."""


class DataLossError(SourceError):
    """Offsets the query still needs are gone (``failOnDataLoss=true``).

    Raised when records were deleted before being read (retention, deleted
    records), a partition or topic disappeared, or a partition's offsets went
    backwards (topic re-created). Set ``failOnDataLoss=false`` to continue
    from what is still there.
    """
