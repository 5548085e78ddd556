"""Errors of the application layer's jobs and embedded broker (the root,
:class:`~acidstream.acid.errors.AcidStreamError`, stays in ``acid/errors.py``)."""

from __future__ import annotations

from acidstream.acid.errors import AcidStreamError

__all__ = ["BrokerError", "JobFailedError"]


class BrokerError(AcidStreamError):
    """The embedded broker could not be found, started or reached."""


class JobFailedError(AcidStreamError):
    """A streaming job stopped on a failure. The message names the cause (the first
    acidstream error found in Spark's report) and what to do about it."""
