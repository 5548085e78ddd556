"""Test hooks: fault injection at named steps, in one place.

Production code calls :func:`point` at the steps where a crash or a fault matters for
recovery (``"sink.after_commit"``, ``"commit_txn.before_commit"``, ...). Nothing happens
unless a test armed that step, in one of two ways:

- ``ACIDSTREAM_FAULTS=step1,step2`` in the environment of a child process: the process
  SIGKILLs itself when it reaches one of the steps (crash tests). The variable is read
  once, on the first call of :func:`point`, never at import time. With
  ``ACIDSTREAM_FAULTS_ONCE=<dir>`` an armed step kills only the first process to reach it
  (it creates ``<dir>/<step>`` exclusively before dying; later hits, in any process, pass):
  a Spark task's first attempt dies at the step and its retry goes through.
- :func:`set_hook` in-process: the callable is called with each step's name and may raise
  to simulate a fault there (or disturb a server, e.g. terminate a PostgreSQL backend).

This is the only module that reads a fault-injection setting; the list of steps is in
``docs/architecture.md`` ("Test hooks").
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

__all__ = ["ENV", "ONCE_ENV", "point", "set_hook"]

ENV = "ACIDSTREAM_FAULTS"
ONCE_ENV = "ACIDSTREAM_FAULTS_ONCE"

log = logging.getLogger(__name__)

_armed: frozenset[str] | None = None
_hook: Callable[[str], None] | None = None


def _armed_steps() -> frozenset[str]:
    global _armed
    if _armed is None:
        _armed = frozenset(filter(None, os.environ.get(ENV, "").split(",")))
    return _armed


def _first_hit(step: str) -> bool:
    """Whether this hit of an armed step kills: always, unless :data:`ONCE_ENV` names a
    directory, where only the hit that creates the step's marker file does (atomic across
    processes: ``O_CREAT | O_EXCL``)."""
    once = os.environ.get(ONCE_ENV)
    if not once:
        return True
    try:
        os.close(os.open(os.path.join(once, step), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Install (or with ``None`` remove) the in-process hook called at every step."""
    global _hook
    _hook = hook


def point(step: str, *, before_crash: Callable[[], None] | None = None) -> None:
    """A named step: crash here if armed, else call the in-process hook if one is set.

    ``before_crash`` runs first when the process is about to die (a pipelining database
    connection flushes, so the crash falls between statements the server has run).
    """
    if step in _armed_steps() and _first_hit(step):
        if before_crash is not None:
            before_crash()
        log.warning("fault injection: SIGKILL at %s", step)
        os.kill(os.getpid(), signal.SIGKILL)
    hook = _hook
    if hook is not None:
        if before_crash is not None:
            before_crash()
        hook(step)
